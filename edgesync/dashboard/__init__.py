"""The dashboard: a read-only web page of a run, live (`edgesync run|coordinator --dashboard`) or replayed from
its folder (`edgesync dashboard RUN_DIR`). feed.py reads the folder, app.py serves it, serve.py runs the server
(in its own process beside a live run, so that it never takes the coordinator's time), page.html draws it."""
