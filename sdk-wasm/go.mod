module github.com/sluicehq/sluice/sdk-wasm

go 1.26.8
