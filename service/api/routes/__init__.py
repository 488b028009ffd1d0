"""The API's routes, one module per resource; service/api/app.py mounts them."""
