"""The coding playground: Django project and app in one package.

Browser <-> WebSocket consumer (consumers.py) <-> channel layer "inference" queue
<-> GPU worker (worker.py) that owns one inference.engine.Engine.
Nothing here does model math; that lives in inference/.
"""
