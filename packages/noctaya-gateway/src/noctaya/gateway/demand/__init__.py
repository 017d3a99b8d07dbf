"""Demand on its way to KEDA: the latest-value broadcast every subscriber reads (`feed`) and, with
several gateway replicas, the reports to the aggregator (`reporter`). The scaler serving KEDA's
External Push stream is `noctaya.gateway.scaler`.
"""
