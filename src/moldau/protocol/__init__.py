"""moldau.protocol"""
