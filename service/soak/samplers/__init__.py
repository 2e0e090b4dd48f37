"""soak.samplers"""
