"""Chapter 02, distribution tests: exact sequence laws, frequency tests with stated power, boundary cases, the verifier's throughput."""
