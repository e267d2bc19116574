module reconcile-host/guest

go 1.26
