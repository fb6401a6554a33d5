#!/bin/bash
echo rolling back
