"""moldau.cluster"""
