"""The `swivel sandbox` and `swivel bench` command groups, registered as `swivel.commands`
entry points so that the product's `swivel` command finds them without importing this
package by name."""
