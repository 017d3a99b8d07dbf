"""Model delivery: fetchers behind the core's `ModelFetcher` port."""
