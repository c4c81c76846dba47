"""The controller's read-only web pages: a dashboard of the queue, the nodes,
each job's history and the utilization over time, served beside /metrics
(``[controller] metrics_address``)."""
