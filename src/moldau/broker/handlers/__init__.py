"""moldau.broker.handlers"""
