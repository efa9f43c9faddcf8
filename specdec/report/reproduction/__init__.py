"""`make reproduce`'s machinery: every recomputed table held against the committed one (`status`,
`timing`) and the recompute budget (`budget`); the reproduction page presents them."""
