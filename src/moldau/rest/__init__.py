"""The REST Proxy: Confluent's v2 and v3 HTTP APIs over the broker, as one of its clients.

``moldau rest`` serves it (uvicorn); :func:`moldau.rest.app.build_app` builds the Starlette
app, one router module per resource under ``routers/``. The Kafka side is confluent-kafka:
one shared producer (``producer.py``), an admin client (``kafka_admin.py``) and one consumer
per v2 consumer instance (``consumers.py``).
"""
