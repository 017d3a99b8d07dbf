"""vendor_nvidia"""
