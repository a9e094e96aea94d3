"""The teaching around the runs: workshops as data and the explorer's strings in zh and en."""
