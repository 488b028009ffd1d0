"""The API's routes, one module per resource; service/app.py mounts them."""
