"""vendor_ascend"""
