"""moldau.cli"""
