"""The web console ``odradek console`` serves: the Starlette app (app.py), the data it shows,
fetched with the client library (data.py), and its script and style sheet (static/)."""
