"""soak.load"""
