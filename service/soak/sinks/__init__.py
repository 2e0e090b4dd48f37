"""soak.sinks"""
