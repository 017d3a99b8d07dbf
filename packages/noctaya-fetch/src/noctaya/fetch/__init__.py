"""Model delivery: the `noctaya-fetch` command and the fetchers behind it.

Every platform delivers a model by running the command, never by calling a fetcher: the cluster's
prewarm and staging Jobs run it from the Noctaya image, and local mode runs it as a child
process, so a fetch that blocks for minutes and the hub clients it imports stay out of the
caller. Its command line, exit statuses and output (`noctaya.fetch.cli`) are the contract; the
operator plans that command line with `noctaya.core.cache_planning.fetch_command`.
"""
