"""The measurement protocol, shared by the chapters, `make bench` and `make gpu`: the models a
measured chapter decodes with (`subjects`), the one timing harness, the cost curve T(n) (a pair's
curves: `curves`), the paired intervals and the words they allow (`protocol`), the cost model held
against measured runs (`prediction`), the acceptance recorder and controlled acceptance, the stated
draft rule, the serving workload and its paired rate sweeps (in process and against a server), and
the GPU run's sections, chapter 08's timed alternatives (`alternatives`), and chapter 06's runs pooled
over re-runs (`replication`)."""
