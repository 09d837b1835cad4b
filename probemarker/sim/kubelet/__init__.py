"""The simulated kubelet (`node`), the pod status it writes (`podstatus`) and an
optional scheduler that binds pods to the sim's nodes."""
