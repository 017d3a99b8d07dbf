"""local mode"""
