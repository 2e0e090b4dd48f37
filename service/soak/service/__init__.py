"""soak.service"""
