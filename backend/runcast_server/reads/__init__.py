"""The read path: visibility, run summaries, metric rollup queries, exports.

Route modules in ``runcast_server.api.routes`` stay thin and call into here.
"""
