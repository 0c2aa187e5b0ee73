"""cogate.controller"""
