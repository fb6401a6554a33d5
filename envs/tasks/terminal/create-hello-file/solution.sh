#!/bin/bash
echo 'Hello, NextState!' > /app/hello.txt
