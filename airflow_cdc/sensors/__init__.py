"""sensors"""
