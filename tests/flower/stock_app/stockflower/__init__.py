"""A quickstart-style Flower app: only `@app.train()` and `@app.evaluate()`, Flower's standard Message API."""
