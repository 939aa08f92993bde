"""moldau.broker"""
