"""The kstreams-spark JVM jar, built by ``make jar`` and shipped inside the Python package."""
