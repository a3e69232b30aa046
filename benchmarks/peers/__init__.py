"""Peer comparisons: kira side by side with what a user would pick instead (faiss, hnswlib, usearch, Milvus, numpy, torch eager)."""
