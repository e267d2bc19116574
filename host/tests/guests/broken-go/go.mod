module reconcile-host/tests/broken-go

go 1.26

require reconcile-host/guest v0.0.0

replace reconcile-host/guest => ../../../../guest-sdk/go
