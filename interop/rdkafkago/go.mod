module github.com/sluicehq/sluice/interop/rdkafkago

go 1.26.8

require github.com/confluentinc/confluent-kafka-go/v2 v2.11.1
