"""soak.upgrade"""
