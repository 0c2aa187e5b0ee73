"""cogate.webhook"""
