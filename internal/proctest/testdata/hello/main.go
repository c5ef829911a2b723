// Command hello prints "hello": the package proctest's tests build.
package main

import "fmt"

func main() { fmt.Println("hello") }
