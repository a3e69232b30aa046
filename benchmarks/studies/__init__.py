"""Studies: one-off measurements that chose among kira's own options (encoders, weights, engines, thresholds), rejected ones included."""
