"""moldau.coordinator"""
