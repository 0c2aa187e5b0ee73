"""cogate.certs"""
