"""moldau.log"""
