"""soak.analysis"""
