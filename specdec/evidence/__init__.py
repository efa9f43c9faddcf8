"""The computations behind the exactness chapters (01, 02) and the idealized cost model (03): tables
of exact laws, frequency tests, boundary cases and model curves, built from `specdec.core`."""
