"""soak.targets"""
