"""Routes: source tables written into one target table. ``routed``: the ``RoutedSink``
over another sink; ``route_columns``: the target's columns as its sources' change (pure).
"""
