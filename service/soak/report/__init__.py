"""soak.report"""
