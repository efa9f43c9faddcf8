"""Chapter 07, the GPU run's tables as the chapter shows them."""
